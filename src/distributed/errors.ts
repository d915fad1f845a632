/**
 * Typed errors of loom.distributed. A collective never blocks forever: it fails with one of these
 * (a peer died, the deadline passed, MPI returned an error), and mismatched shapes across ranks
 * are a LoomShapeError naming every rank's shape.
 */
import { LoomError } from "../tensor/errors.ts";

/** A collective or process-group call failed (MPI returned an error, or misuse such as no init). */
export class LoomDistributedError extends LoomError {}

/** A peer process of the group died (found by its pid on this host, or reported by MPI). */
export class LoomRankFailedError extends LoomDistributedError {
  constructor(message: string, readonly failed_ranks: readonly number[]) {
    super(message);
  }
}

/**
 * A collective did not complete before the process group's timeout (torch's
 * `init_process_group(timeout=...)`; default 300 s, `LOOM_DIST_TIMEOUT_MS`).
 */
export class LoomCollectiveTimeoutError extends LoomDistributedError {}
