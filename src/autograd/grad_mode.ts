/**
 * Global gradient mode (torch.no_grad / torch.enable_grad / torch.is_grad_enabled).
 */
let enabled = true;

export function is_grad_enabled(): boolean {
  return enabled;
}

export function set_grad_enabled(mode: boolean): void {
  enabled = mode;
}

/**
 * A grad-mode scope for TypeScript's `using` declaration (torch's `with torch.no_grad():`): the
 * mode is set when the guard is made and the previous mode restored when the block exits.
 * @example
 *   { using _ = no_grad(); const y = model.call(x); } // no graph recorded for y
 */
export class GradModeGuard implements Disposable {
  private readonly prev: boolean;
  constructor(mode: boolean) {
    this.prev = enabled;
    enabled = mode;
  }
  [Symbol.dispose](): void {
    enabled = this.prev;
  }
}

/**
 * Gradient recording off (torch.no_grad): `no_grad(fn)` runs `fn` so (async functions too: the
 * mode is restored when the returned promise settles); `no_grad()` returns a guard for `using`.
 */
export function no_grad(): GradModeGuard;
export function no_grad<R>(fn: () => R): R;
export function no_grad<R>(fn?: () => R): R | GradModeGuard {
  return fn ? withGradMode(false, fn) : new GradModeGuard(false);
}

/** Gradient recording on (torch.enable_grad): `enable_grad(fn)`, or `enable_grad()` for `using`. */
export function enable_grad(): GradModeGuard;
export function enable_grad<R>(fn: () => R): R;
export function enable_grad<R>(fn?: () => R): R | GradModeGuard {
  return fn ? withGradMode(true, fn) : new GradModeGuard(true);
}

/**
 * torch.inference_mode: no gradient recording, as `no_grad` (`inference_mode(fn)` or `using`).
 * torch also marks the tensors made inside as inference tensors, which may not be used in autograd
 * later; Loom does not make that distinction (they are ordinary tensors without a graph).
 */
export function inference_mode(): GradModeGuard;
export function inference_mode<R>(fn: () => R): R;
export function inference_mode<R>(fn?: () => R): R | GradModeGuard {
  return fn ? withGradMode(false, fn) : new GradModeGuard(false);
}

function withGradMode<R>(mode: boolean, fn: () => R): R {
  const prev = enabled;
  enabled = mode;
  let r: R;
  try {
    r = fn();
  } catch (e) {
    enabled = prev;
    throw e;
  }
  if (r instanceof Promise) {
    return r.finally(() => { enabled = prev; }) as R;
  }
  enabled = prev;
  return r;
}
