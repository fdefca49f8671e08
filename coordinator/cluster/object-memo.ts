/**
 * A value derived from an object, kept on the object itself under a private symbol property
 * (not enumerable: invisible to spread, JSON, Object.keys and test equality). For the tens of
 * thousands of cached objects a pass reads, this is the memo a WeakMap would be, minus the GC's
 * work on a WeakMap's entries and the hashing on every read. An object that cannot take new
 * properties (frozen) simply gets no memo, so its value is derived on every read.
 */
export class ObjectMemo<O extends object, V> {
  readonly #key: symbol;

  constructor(description: string) {
    this.#key = Symbol(description);
  }

  get(object: O): V | undefined {
    return (object as Record<symbol, V | undefined>)[this.#key];
  }

  set(object: O, value: V): V {
    if (Object.isExtensible(object) || Object.hasOwn(object, this.#key)) {
      Object.defineProperty(object, this.#key, { value, writable: true, configurable: true, enumerable: false });
    }
    return value;
  }
}
