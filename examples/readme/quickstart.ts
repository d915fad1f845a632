import * as loom from "../../src/index.ts";

const w = loom.randn([3, 4], { requires_grad: true });
const x = loom.randn([8, 4]);
const loss = loom.cross_entropy(x.matmul(w.t()), loom.tensor([0, 1, 2, 0, 1, 2, 0, 1]));
loss.backward();                         // w.grad: [3, 4]

const lazy = x.lazy().matmul(w.t().lazy()).softmax(-1);   // records nodes; shape errors raise here
console.log(lazy.toDot());               // Graphviz of the pending graph
const y = lazy.eval();                   // computes it (each node once) -> eager Tensor
