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
 * Run `fn` with gradient recording off (torch.no_grad). Works with async functions too: the
 * mode is restored when the returned promise settles.
 */
export function no_grad<R>(fn: () => R): R {
  return withGradMode(false, fn);
}

/** Run `fn` with gradient recording on (torch.enable_grad). */
export function enable_grad<R>(fn: () => R): R {
  return withGradMode(true, fn);
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
