/**
 * Kubernetes label selectors, compiled once into requirements and matched without allocation.
 *
 * Two spellings compile to the same `Selector`:
 * - the string form (`app=web,tier!=db,env in (a,b),!legacy`), which the GPU Operator uses for
 *   `waitForCompletion.podSelector`, `drain.podSelector` and `validation.podSelector`;
 * - the object form (`matchLabels` / `matchExpressions`, metav1.LabelSelector), used for the
 *   DaemonSet selector and pool node selectors.
 *
 * An empty selector matches everything (as in Kubernetes); callers that give "" another meaning
 * (e.g. "wait on no pods") decide that before matching.
 */
export type SelectorOperator = 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';

export interface Requirement {
  readonly key: string;
  readonly operator: SelectorOperator;
  /** Values for In/NotIn; empty for Exists/DoesNotExist. */
  readonly values: readonly string[];
}

export interface Selector {
  readonly requirements: readonly Requirement[];
  /** The selector in Kubernetes' string form, for messages. */
  readonly text: string;
}

export type Labels = Readonly<Record<string, string>>;

export const EVERYTHING: Selector = { requirements: [], text: '' };

export function matchesSelector(selector: Selector, labels: Labels): boolean {
  for (const r of selector.requirements) {
    const value = labels[r.key];
    switch (r.operator) {
      case 'In':
        if (value === undefined || !r.values.includes(value)) return false;
        break;
      case 'NotIn':
        // Kubernetes: NotIn matches objects that lack the key.
        if (value !== undefined && r.values.includes(value)) return false;
        break;
      case 'Exists':
        if (value === undefined) return false;
        break;
      case 'DoesNotExist':
        if (value !== undefined) return false;
        break;
    }
  }
  return true;
}

/** metav1.LabelSelector as it appears in a spec. */
export interface LabelSelectorObject {
  readonly matchLabels?: Readonly<Record<string, string>> | undefined;
  readonly matchExpressions?:
    | readonly { readonly key: string; readonly operator: string; readonly values?: readonly string[] | undefined }[]
    | undefined;
}

export type SelectorResult = { readonly ok: true; readonly selector: Selector } | { readonly ok: false; readonly message: string };

const OPERATORS: readonly string[] = ['In', 'NotIn', 'Exists', 'DoesNotExist'];

export function compileLabelSelector(object: LabelSelectorObject): SelectorResult {
  const requirements: Requirement[] = [];
  // A key or value no label can have would make the selector match nothing, silently.
  for (const [key, value] of Object.entries(object.matchLabels ?? {})) {
    if (!isLabelKey(key)) return { ok: false, message: `matchLabels: ${JSON.stringify(key.slice(0, 80))} is not a label key` };
    if (!isLabelValue(value)) return { ok: false, message: `matchLabels.${key}: ${JSON.stringify(value.slice(0, 80))} is not a label value (at most 63 letters, digits, '-', '_', '.')` };
    requirements.push({ key, operator: 'In', values: [value] });
  }
  for (const [i, e] of (object.matchExpressions ?? []).entries()) {
    if (!OPERATORS.includes(e.operator)) {
      return { ok: false, message: `matchExpressions[${i}].operator must be one of ${OPERATORS.join(', ')}` };
    }
    if (!isLabelKey(e.key)) return { ok: false, message: `matchExpressions[${i}].key: ${JSON.stringify(e.key.slice(0, 80))} is not a label key` };
    const badValue = (e.values ?? []).find((v) => !isLabelValue(v));
    if (badValue !== undefined) return { ok: false, message: `matchExpressions[${i}].values: ${JSON.stringify(badValue.slice(0, 80))} is not a label value` };
    const operator = e.operator as SelectorOperator;
    const values = e.values ?? [];
    const needsValues = operator === 'In' || operator === 'NotIn';
    if (needsValues && values.length === 0) {
      return { ok: false, message: `matchExpressions[${i}]: operator ${operator} needs at least one value` };
    }
    if (!needsValues && values.length > 0) {
      return { ok: false, message: `matchExpressions[${i}]: operator ${operator} takes no values` };
    }
    requirements.push({ key: e.key, operator, values });
  }
  return { ok: true, selector: { requirements, text: formatRequirements(requirements) } };
}

// A qualified label key: optional DNS-subdomain prefix and a name of up to 63 characters.
const KEY = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/;

export function isLabelKey(key: string): boolean {
  return KEY.test(key) && key.length <= 317;
}

export function isLabelValue(value: string): boolean {
  return VALUE.test(value);
}

/**
 * Parses the string form (k8s.io/apimachinery labels.Parse): comma-separated terms
 * `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`.
 */
export function parseLabelSelector(text: string): SelectorResult {
  const requirements: Requirement[] = [];
  for (const rawTerm of splitTerms(text)) {
    const term = rawTerm.trim();
    if (term === '') return { ok: false, message: `empty term in selector "${text}"` };
    const parsed = parseTerm(term);
    if (typeof parsed === 'string') return { ok: false, message: `${parsed} in selector "${text}"` };
    requirements.push(parsed);
  }
  return { ok: true, selector: { requirements, text: text.trim() } };
}

/** Splits on commas that are not inside parentheses. */
function splitTerms(text: string): string[] {
  if (text.trim() === '') return [];
  const terms: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) {
      terms.push(text.slice(start, i));
      start = i + 1;
    }
  }
  terms.push(text.slice(start));
  return terms;
}

const SET_TERM = /^(\S+)\s+(in|notin)\s*\(([^()]*)\)$/;
const EQUALITY_TERM = /^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$/;

function parseTerm(term: string): Requirement | string {
  const set = SET_TERM.exec(term);
  if (set !== null) {
    const [, key = '', op, list = ''] = set;
    const values = list.split(',').map((v) => v.trim());
    if (values.some((v) => v === '' || !isLabelValue(v))) return `invalid value list "(${list})"`;
    return checkKey({ key, operator: op === 'in' ? 'In' : 'NotIn', values });
  }
  const equality = EQUALITY_TERM.exec(term);
  if (equality !== null) {
    const [, key = '', op, value = ''] = equality;
    if (!isLabelValue(value)) return `invalid value "${value}"`;
    return checkKey({ key, operator: op === '!=' ? 'NotIn' : 'In', values: [value] });
  }
  if (term.startsWith('!')) return checkKey({ key: term.slice(1).trim(), operator: 'DoesNotExist', values: [] });
  return checkKey({ key: term, operator: 'Exists', values: [] });
}

function checkKey(r: Requirement): Requirement | string {
  return isLabelKey(r.key) ? r : `invalid label key "${r.key}"`;
}

function formatRequirements(requirements: readonly Requirement[]): string {
  return requirements
    .map((r) => {
      switch (r.operator) {
        case 'In':
          return r.values.length === 1 ? `${r.key}=${r.values[0] ?? ''}` : `${r.key} in (${r.values.join(',')})`;
        case 'NotIn':
          return `${r.key} notin (${r.values.join(',')})`;
        case 'Exists':
          return r.key;
        case 'DoesNotExist':
          return `!${r.key}`;
      }
    })
    .join(',');
}
