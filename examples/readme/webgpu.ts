import * as loom from "../../src/index.ts";
await loom.init_webgpu();                   // loads bun-webgpu (Dawn) once; returns {available, reason, device}
const x = loom.randn([64, 128]).to("webgpu");
const y = x.lazy().matmul(x.t().lazy()).softmax(-1).eval();   // one submit
console.log(await y.data());
