// The promptfoo peer's prompt (benchmarks/peers.py): the mtbench_pair messages of benchmarks/request.py,
// prepared per test as vars, so promptfoo sends the same request as judgesweep and inspect-ai.
module.exports = ({ vars }) => [
  { role: 'system', content: vars.system },
  { role: 'user', content: vars.user },
];
