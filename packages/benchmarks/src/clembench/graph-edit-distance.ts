import { NUMPY_EXP_MINUS_HALF } from "./numpy-exp-table.js";

// networkx `graph_edit_distance(G1, G2)` with its defaults, for small undirected simple graphs (self-loops
// allowed): node substitution costs 0 (no labels), node and edge insertion/deletion cost 1, edge substitution 0.
// Substituting a node never costs more than deleting it and inserting another, so an optimal edit path maps
// min(|V1|, |V2|) nodes injectively and
//   GED = ||V1| − |V2|| + |E1| + |E2| − 2 · max over injections of the edges both graphs share.
// The maximum is found by branch and bound over injections of the smaller graph into the larger.

export interface SimpleGraph {
  nodes: string[];
  /** undirected edges, each once ([a, b] with a ≤ b; [a, a] for a self-loop) */
  edges: [string, string][];
}

/** networkx `nx.Graph()` semantics: nodes added in order, edges deduplicated and undirected, edge ends added. */
export function makeGraph(nodes: string[], edges: [string, string][]): SimpleGraph {
  const ns: string[] = [];
  const seen = new Set<string>();
  const add = (n: string) => {
    if (!seen.has(n)) {
      seen.add(n);
      ns.push(n);
    }
  };
  for (const n of nodes) add(n);
  const es = new Map<string, [string, string]>();
  for (const [a, b] of edges) {
    add(a);
    add(b);
    const [x, y] = a <= b ? [a, b] : [b, a];
    es.set(`${x}\u0000${y}`, [x, y]);
  }
  return { nodes: ns, edges: [...es.values()] };
}

export function graphEditDistance(g1: SimpleGraph, g2: SimpleGraph): number {
  const [small, large] = g1.nodes.length <= g2.nodes.length ? [g1, g2] : [g2, g1];
  const n = small.nodes.length;
  const m = large.nodes.length;
  const si = new Map(small.nodes.map((x, i) => [x, i]));
  const li = new Map(large.nodes.map((x, i) => [x, i]));
  const adjS: boolean[][] = Array.from({ length: n }, () => new Array(n).fill(false));
  const adjL: boolean[][] = Array.from({ length: m }, () => new Array(m).fill(false));
  for (const [a, b] of small.edges) adjS[si.get(a)!][si.get(b)!] = adjS[si.get(b)!][si.get(a)!] = true;
  for (const [a, b] of large.edges) adjL[li.get(a)!][li.get(b)!] = adjL[li.get(b)!][li.get(a)!] = true;
  // visit small-graph nodes by decreasing degree; an edge counts when its later endpoint is placed
  const order = [...small.nodes.keys()].sort((a, b) => adjS[b].filter(Boolean).length - adjS[a].filter(Boolean).length);
  const pos = new Array(n).fill(-1);
  order.forEach((v, k) => {
    pos[v] = k;
  });
  // edges of the small graph still to be decided after step k (for the bound)
  const remainingAfter = new Array(n + 1).fill(0);
  for (let k = n - 1; k >= 0; k--) {
    const v = order[k];
    let c = 0;
    for (let u = 0; u < n; u++) if (adjS[v][u] && pos[u] <= k) c++;
    remainingAfter[k] = remainingAfter[k + 1] + c;
  }
  const img = new Array(n).fill(-1);
  const used = new Array(m).fill(false);
  let best = -1;
  const step = (k: number, common: number) => {
    if (common + remainingAfter[k] <= best) return;
    if (k === n) {
      best = common;
      return;
    }
    const v = order[k];
    for (let w = 0; w < m; w++) {
      if (used[w]) continue;
      let gain = 0;
      for (let j = 0; j <= k; j++) {
        const u = order[j];
        if (!adjS[v][u]) continue;
        const wu = u === v ? w : img[u];
        if (adjL[w][wu]) gain++;
      }
      used[w] = true;
      img[v] = w;
      step(k + 1, common + gain);
      used[w] = false;
      img[v] = -1;
    }
  };
  step(0, 0);
  return m - n + g1.edges.length + g2.edges.length - 2 * Math.max(best, 0);
}

/**
 * textmapworld_utils `calculate_similarity`: 1 − 2·(σ(0.5·GED) − 0.5), with numpy's exp values (tabulated for
 * the integer distances; Math.exp beyond the table).
 */
export function graphSimilarity(g1: SimpleGraph, g2: SimpleGraph): number {
  const d = graphEditDistance(g1, g2);
  const e = NUMPY_EXP_MINUS_HALF[d] ?? Math.exp(-0.5 * d);
  const normalized = 2 * (1 / (1 + e) - 0.5);
  return 1 - normalized;
}
