"""The churn ledger's fragmentation index answers as its reference rule, node by node."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu_simulate.churn_fragments import FragmentIndex, Need
from vgpu_simulate.churn_ledger import fragmented_on
from vgpu_simulate.trace import TraceNode

NODES = [TraceNode("a", 8000, 32768, 2, "T4"), TraceNode("b", 16000, 65536, 4, "V100M32"),
         TraceNode("c", 4000, 16384, 1, "A10"), TraceNode("d", 32000, 131072, 8, "G2"),
         TraceNode("e", 8000, 8192, 0, "")]

needs = st.builds(Need, gpus=st.integers(1, 8), share=st.sampled_from([100, 250, 500, 1000]),
                  cpu=st.sampled_from([0, 1000, 6000]), memory=st.sampled_from([0, 16384]),
                  models=st.sampled_from([(), ("T4",), ("V100", "A10"), ("g2",)]))
steps = st.lists(st.one_of(
    st.tuples(st.just("take"), st.integers(0, 4), st.integers(0, 7),
              st.sampled_from([100, 250, 500, 1000])),
    st.tuples(st.just("hold"), st.integers(0, 4), st.sampled_from([500, 2000]),
              st.sampled_from([1024, 8192])),
    st.tuples(st.just("need"), needs),
    st.tuples(st.just("drop"), st.integers(0, 50)),
    st.just(("check",)),
), max_size=40)


def reference(index: FragmentIndex, pending: list[Need]) -> int:
    out = 0
    for row, node in enumerate(NODES):
        free = [int(f) for f in index.free[row, :node.gpus]]
        if sum(free) and fragmented_on(free, int(index.cpu[row]), int(index.memory[row]),
                                       node.model, set(pending)):
            out += sum(free)
    return out


@settings(max_examples=200, deadline=None)
@given(steps)
def test_the_index_answers_as_the_rule_after_any_changes(ops: list[tuple[object, ...]]) -> None:
    index = FragmentIndex(NODES)
    pending: list[Need] = []
    for op in ops:
        if op[0] == "take":
            _, row, gpu, milli = op
            assert isinstance(row, int) and isinstance(gpu, int) and isinstance(milli, int)
            node = NODES[row]
            if gpu < node.gpus and index.free[row, gpu] >= milli:
                index.take(row, gpu, milli)
            elif gpu < node.gpus and index.free[row, gpu] < 1000:
                index.take(row, gpu, -min(milli, 1000 - int(index.free[row, gpu])))
        elif op[0] == "hold":
            _, row, cpu, memory = op
            assert isinstance(row, int) and isinstance(cpu, int) and isinstance(memory, int)
            index.hold(row, cpu, memory)
        elif op[0] == "need":
            need = op[1]
            assert isinstance(need, Need)
            pending.append(need)
            index.add_need(need)
        elif op[0] == "drop" and pending:
            which = op[1]
            assert isinstance(which, int)
            index.remove_need(pending.pop(which % len(pending)))
        else:
            assert index.fragmented_milli() == reference(index, pending)
    assert index.fragmented_milli() == reference(index, pending)


def test_a_node_split_in_halves_is_fragmented_for_a_whole_gpu_pod() -> None:
    index = FragmentIndex([TraceNode("n", 8000, 32768, 2, "T4")])
    index.take(0, 0, 500)
    index.take(0, 1, 500)
    whole = Need(1, 1000, 1000, 1024, ())
    index.add_need(Need(4, 1000, 1000, 1024, ()))  # more GPUs than the node has: never
    index.add_need(whole)
    assert index.fragmented_milli() == 1000
    index.remove_need(whole)  # the pod left; the node did not change
    assert index.fragmented_milli() == 0
    index.add_need(whole)
    assert index.fragmented_milli() == 1000
    index.take(0, 1, -500)  # one GPU whole again: the pod fits, nothing is fragmented
    assert index.fragmented_milli() == 0
    index.remove_need(whole)
    index.take(0, 1, 500)
    assert index.fragmented_milli() == 0
