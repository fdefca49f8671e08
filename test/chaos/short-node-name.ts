/**
 * A node's name as the chaos summaries print it: what follows the world's id (`<id>-01` → `01`,
 * the node added mid-rollout `<id>-new` → `new`).
 */
export function shortNodeName(name: string): string {
  const dash = name.lastIndexOf('-');
  return dash === -1 ? name : name.slice(dash + 1);
}
