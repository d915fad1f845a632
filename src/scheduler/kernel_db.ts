/**
 * The kernel database: measured timings and errors of catalog implementations (seed 003's
 * kernel database), in SQLite (`bun:sqlite`) under the user's cache directory
 * (`$LOOM_CACHE_DIR`, else `$XDG_CACHE_HOME/loom`, else `~/.cache/loom`; file `kernels.sqlite`).
 * `LOOM_KERNEL_DB=path` names another file, `LOOM_KERNEL_DB=off` disables it (no reads, no
 * writes). `loom tune` (src/cli/tune.ts) writes records; the planner (select.ts) reads them.
 *
 * A record is keyed by (device, op signature, implementation id). The signature is the op name,
 * its dtypes and a shape class: each size rounded up to a power of two, so one measurement
 * covers a neighbourhood of shapes (a training loop's shapes hit the same class every step).
 *
 * Under Deno (no bun:sqlite) the database is off and selection falls back to ranks.
 */
import { mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Application } from "../backends/catalog.ts";
import { loomCacheDir } from "../io/files.ts";
import { isContiguous } from "../tensor/shape.ts";

/** One measurement of one implementation on one op signature. */
export interface KernelRecord {
  /** Backend/device name ("native", "webgpu", ...). */
  device: string;
  /** `signatureOf` the application measured. */
  signature: string;
  /** Catalog implementation id. */
  impl: string;
  /** Timed calls. */
  n: number;
  /** Median and minimum time per call, milliseconds. */
  median_ms: number;
  min_ms: number;
  /** Largest absolute and relative error against the float64 reference over the test inputs. */
  max_abs_err: number;
  max_rel_err: number;
  /** 1 when every element was within the implementation's declared contract, else 0. */
  within_contract: number;
  /** When measured (ms since the epoch). */
  measured_at: number;
}

/** Size class of one dimension: the next power of two (0 stays 0). */
function sizeClass(n: number): number {
  return n <= 1 ? n : 2 ** Math.ceil(Math.log2(n));
}

/**
 * The database key of an application: op name, output dtype, each input's dtype, shape class and
 * whether it is dense, and the variant: a fused op's `describe` text (its program's ops, which
 * does not change with sizes, so one record covers a shape class) or a primitive's attrs.
 */
export function signatureOf(a: Application): string {
  const cls = (s: readonly number[]) => s.map(sizeClass).join("x");
  const variant = a.op.describe ? a.op.describe(a.attrs as never) : a.attrs == null ? "" : JSON.stringify(a.attrs);
  const ins = a.inputs.map((i) => `${i.dtype}[${cls(i.shape)}]${isContiguous(i.shape, i.strides) ? "" : "s"}`).join(",");
  return `${a.op.name}:${a.dtype}[${cls(a.shape)}](${ins})${variant ? `#${variant}` : ""}`;
}

interface Db {
  query(sql: string): { all(...p: unknown[]): unknown[]; run(...p: unknown[]): unknown };
  exec(sql: string): void;
  close(): void;
}

let db: Db | null | undefined;
let dbPath = "";
/** Bumped by every write: compiled plans chose their kernels from older records (compile.ts keys plans by it). */
let generation = 0;

/** The database's write generation (part of the plan cache key). */
export function kernelDbGeneration(): number {
  return generation;
}

/** In-memory copy of the records read, by `${device}\0${signature}`. */
const cache = new Map<string, Map<string, Measured>>();

/** Where the database lives ("" when disabled). */
export function kernelDbPath(): string {
  const env = process.env.LOOM_KERNEL_DB;
  if (env === "off") return "";
  if (env) return env;
  return join(loomCacheDir(), "kernels.sqlite");
}

function open(): Db | null {
  const path = kernelDbPath();
  if (db !== undefined && path === dbPath) return db;
  db?.close();
  cache.clear();
  dbPath = path;
  db = null;
  if (!path || typeof (globalThis as { Bun?: unknown }).Bun === "undefined") return null;
  try {
    mkdirSync(dirname(path), { recursive: true });
    // a runtime import (computed: bundlers do not follow it) keeps this module loadable where bun:sqlite does not exist (Deno, browsers)
    const { Database } = require("bun:" + "sqlite") as { Database: new (p: string) => Db };
    const d = new Database(path);
    d.exec("PRAGMA busy_timeout = 2000");
    // the schema's version is in the table name: a file from an older Loom is ignored, not misread
    d.exec(`CREATE TABLE IF NOT EXISTS kernels_v1 (
      device TEXT NOT NULL, signature TEXT NOT NULL, impl TEXT NOT NULL,
      n INTEGER NOT NULL, median_ms REAL NOT NULL, min_ms REAL NOT NULL,
      max_abs_err REAL NOT NULL, max_rel_err REAL NOT NULL, within_contract INTEGER NOT NULL, measured_at INTEGER NOT NULL,
      PRIMARY KEY (device, signature, impl))`);
    db = d;
  } catch (e) {
    console.error(`[loom] kernel database unavailable at ${path}: ${(e as Error).message}; choosing kernels by rank`);
    db = null;
  }
  return db;
}

/** What selection needs of a record: median time and measured errors. */
export interface Measured {
  median_ms: number;
  max_abs_err: number;
  max_rel_err: number;
  within_contract: number;
}

/** Records of this signature on `device`, by implementation id (null when the database is off or has none). */
export function lookupTimings(device: string, signature: string): Map<string, Measured> | null {
  const key = `${device}\0${signature}`;
  const hit = cache.get(key);
  if (hit) return hit.size ? hit : null;
  const d = open();
  if (!d) return null;
  const rows = d.query("SELECT impl, median_ms, max_abs_err, max_rel_err, within_contract FROM kernels_v1 WHERE device = ? AND signature = ?").all(device, signature) as (Measured & { impl: string })[];
  const m = new Map(rows.map((r) => [r.impl, r]));
  cache.set(key, m);
  return m.size ? m : null;
}

/** Insert or replace records (one transaction). */
export function writeRecords(records: readonly KernelRecord[]): void {
  const d = open();
  if (!d) return;
  const q = d.query(`INSERT OR REPLACE INTO kernels_v1 (device, signature, impl, n, median_ms, min_ms, max_abs_err, max_rel_err, within_contract, measured_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
  d.exec("BEGIN");
  try {
    for (const r of records) {
      q.run(r.device, r.signature, r.impl, r.n, r.median_ms, r.min_ms, r.max_abs_err, r.max_rel_err, r.within_contract, r.measured_at);
      cache.delete(`${r.device}\0${r.signature}`);
    }
    d.exec("COMMIT");
    generation++;
  } catch (e) {
    d.exec("ROLLBACK");
    throw e;
  }
}

/** Every record (optionally of one device), newest first. */
export function readRecords(device?: string): KernelRecord[] {
  const d = open();
  if (!d) return [];
  const sql = "SELECT * FROM kernels_v1" + (device ? " WHERE device = ?" : "") + " ORDER BY measured_at DESC";
  return (device ? d.query(sql).all(device) : d.query(sql).all()) as KernelRecord[];
}

/** Close the database (tests switch files with LOOM_KERNEL_DB between cases). */
export function closeKernelDb(): void {
  db?.close();
  db = undefined;
  cache.clear();
  generation++;
}
