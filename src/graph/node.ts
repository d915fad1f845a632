/**
 * The lazy graph IR: a Node is one recorded op application (or a source buffer). Nodes are
 * immutable except for `realized`, the buffer cached once the node has been computed, so shared
 * subgraphs are computed once across evals; a realized node drops its inputs (they are no
 * longer needed to produce it, and keeping them would keep every intermediate alive).
 */
import type { DType } from "../tensor/dtype.ts";
import { fmtShape, LoomValueError } from "../tensor/errors.ts";
import type { TensorData } from "../tensor/storage.ts";
import type { OpDef } from "./op.ts";

let nextId = 0;

export class Node {
  readonly id = nextId++;
  inputs: readonly Node[];
  realized: TensorData | null;
  /** A literal made by the surface (wrapped scalar, mask): passes may fold ops over constants. */
  constant = false;
  /**
   * `realized` is the destination buffer of an assign (lazy/deferred.ts): a tensor taking this
   * value must copy it, since the destination may be written again.
   */
  assigned = false;
  /**
   * Set when this node read a buffer privately (a module forward's lift, an internal write) and
   * the buffer has been written since: its value is gone, and using it raises
   * (`staleError`) instead of reading the new contents.
   */
  stale = false;
  /**
   * The autograd record of the lazy tensor that produced this node. While it is not released a
   * later backward may need this value, so a plan that materializes it keeps it (see scheduler).
   */
  tracked: { readonly released: boolean } | null = null;
  /** Scratch of graph walks (scheduler/fingerprint.ts): the walk that last reached this node, and its index there. */
  walk = 0;
  index = 0;

  constructor(
    readonly op: OpDef | null,
    inputs: readonly Node[],
    readonly attrs: unknown,
    readonly shape: readonly number[],
    readonly dtype: DType,
    realized: TensorData | null = null,
  ) {
    this.inputs = inputs;
    this.realized = realized;
  }

  /** A node holding an existing buffer (a constant, a parameter, an eager tensor's data). */
  static source(data: TensorData): Node {
    return new Node(null, [], null, data.shape, data.dtype, data);
  }

  /** A source node holding a literal constant (see `constant`). */
  static constant(data: TensorData): Node {
    const n = Node.source(data);
    n.constant = true;
    return n;
  }

  get label(): string {
    if (!this.op) return this.realized && this.shape.length === 0 && this.realized.data.length > 0 ? `const ${this.realized.data[this.realized.offset]}` : "input";
    const d = this.op.describe?.(this.attrs as never);
    return d ? `${this.op.name}(${d})` : this.op.name;
  }
}

/**
 * The error for using a node whose value was dropped (`stale`): a private read of a buffer
 * written since. Callers check `n.stale` first (a property read on hot graph walks).
 */
export function staleError(n: Node): LoomValueError {
  return new LoomValueError(
    `[lazy] a value (${n.dtype} ${fmtShape(n.shape)}) read inside a module forward or an optimizer/cache update was used after the tensor it read was written in place; its old contents are gone. Realize lazy values before writing the tensors they read, or read them through x.lazy() (which keeps a copy)`,
  );
}

/**
 * Graphviz DOT of the graph below `roots`: one box per node with its op, attrs, shape and dtype;
 * realized nodes are drawn as sources.
 */
export function toDot(roots: readonly Node[], name = "loom"): string {
  const lines = [`digraph ${name} {`, "  rankdir=TB;", '  node [shape=box, fontname="monospace"];'];
  const seen = new Set<Node>();
  const stack = [...roots];
  while (stack.length) {
    const n = stack.pop()!;
    if (seen.has(n)) continue;
    seen.add(n);
    const style = n.op ? "" : ", style=filled, fillcolor=lightgrey";
    lines.push(`  n${n.id} [label="${n.label}\\n${fmtShape(n.shape)} ${n.dtype}"${style}];`);
    for (const c of n.inputs) {
      lines.push(`  n${c.id} -> n${n.id};`);
      stack.push(c);
    }
  }
  lines.push("}");
  return lines.join("\n");
}
