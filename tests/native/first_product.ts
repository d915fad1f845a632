/**
 * Run in a fresh process by runtime.test.ts: the first multithreaded float32 product of this
 * process (every pool worker asks for BLAS at once), then the same product again. Prints
 * {"same": bool, "blas": name} on the last line.
 */
import { nativeBackend } from "../../src/backends/native/backend.ts";
import { OPS } from "../../src/graph/registry.ts";
import { fromValues } from "../../src/tensor/storage.ts";

const nb = nativeBackend();
if (!nb) throw new Error("native backend unavailable");
// [256,256] @ [256,256]: 3.4e7 flops, split into one column block per worker (matmul.c mm_setup)
const S = 256;
const a = fromValues("float32", [S, S], Array.from({ length: S * S }, (_, i) => Math.sin(i) * 0.5));
const b = fromValues("float32", [S, S], Array.from({ length: S * S }, (_, i) => Math.cos(i * 0.7)));
const first = nb.run(OPS.matmul, [a, b], {}, [S, S], "float32").data as Float32Array;
const later = nb.run(OPS.matmul, [a, b], {}, [S, S], "float32").data as Float32Array;
const bits = (x: Float32Array) => new Uint32Array(x.buffer, x.byteOffset, x.length);
const same = bits(first).every((v, i) => v === bits(later)[i]);
console.log(JSON.stringify({ same, blas: nb.blas() }));
