/**
 * Typed errors. Messages start with `[op]` and name every operand, e.g.
 * `[matmul] shapes [2,3] and [4,5]: 3 != 4` (MLX style), so a failure says what and where.
 */
export class LoomError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}
/** Shapes that do not fit an op (broadcast, matmul, reshape...). */
export class LoomShapeError extends LoomError {}
/**
 * A symbolic dimension bound outside its declared range, or to two sizes in one graph
 * (torch's ConstraintViolationError); raised before any kernel runs.
 */
export class LoomConstraintViolationError extends LoomShapeError {}
/** A dtype an op does not accept, or an impossible conversion. */
export class LoomDtypeError extends LoomError {}
/** A dim or index outside the valid range (PyTorch's IndexError). */
export class LoomIndexError extends LoomError {}
/** Misuse of autograd (backward on a non-scalar without gradient, grad of a non-leaf...). */
export class LoomAutogradError extends LoomError {}
/** A malformed or unsupported file (safetensors, config). */
export class LoomFormatError extends LoomError {}
/** Anything else that is the caller's fault (bad argument values). */
export class LoomValueError extends LoomError {}

/** Assert with a lazily built message, so hot paths pay nothing when the check passes. */
export function assert(cond: unknown, msg: () => string, E: new (m: string) => Error = LoomValueError): asserts cond {
  if (!cond) throw new E(msg());
}

/** `[2, 3]` style shape text used in every message. */
export function fmtShape(s: readonly number[]): string {
  return `[${s.join(", ")}]`;
}
