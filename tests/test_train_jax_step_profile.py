"""bench/train_jax/step_profile.py: what each compiled instruction is, and where a profiled step's time went.

A GPU's program is read as XLA:GPU prints it (cuDNN and cuBLAS custom calls, fusions calling fused
computations); the trace's events as Perfetto JSON holds them. One real profile of a CPU run is taken
in tests/test_train_jax_run.py.
"""
import pytest

from bench.train_jax import step_profile as sp

SCOPE = "optimizer_update"
# The shapes of XLA:GPU's optimized HLO text (abridged): a cuDNN convolution, a fused batch-norm statistic,
# a fused momentum update, a cuBLAS matmul, an all-reduce, and a fusion holding a convolution.
HLO = """HloModule jit_replica_step, entry_computation_layout={...}

%fused_computation.7 (param_0.1: f32[64]) -> f32[64] {
  %param_0.1 = f32[64]{0} parameter(0)
  %multiply.3 = f32[64]{0} multiply(%param_0.1, %param_0.1), metadata={op_name="jit(replica_step)/shard_map/optimizer_update/mul"}
  ROOT %add.9 = f32[64]{0} add(%multiply.3, %param_0.1), metadata={op_name="jit(replica_step)/shard_map/optimizer_update/add"}
}

%fused_computation.8 (param_0.2: bf16[8,56,56,64]) -> f32[64] {
  %param_0.2 = bf16[8,56,56,64]{3,2,1,0} parameter(0)
  %convert.1 = f32[8,56,56,64]{3,2,1,0} convert(%param_0.2), metadata={op_name="jit(replica_step)/shard_map/jvp(ResNet)/stem_bn/convert"}
  ROOT %reduce.2 = f32[64]{0} reduce(%convert.1, %constant.1), dimensions={0,1,2}, to_apply=%region_0.1, metadata={op_name="jit(replica_step)/shard_map/jvp(ResNet)/stem_bn/reduce_sum"}
}

%fused_computation.9 (param_0.3: bf16[8,56,56,64], param_1.3: bf16[3,3,64,64]) -> bf16[8,56,56,64] {
  %param_0.3 = bf16[8,56,56,64]{3,2,1,0} parameter(0)
  %param_1.3 = bf16[3,3,64,64]{3,2,1,0} parameter(1)
  ROOT %convolution.4 = bf16[8,56,56,64]{3,2,1,0} convolution(%param_0.3, %param_1.3), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}

ENTRY %main.100 (Arg_0.1: bf16[8,224,224,3]) -> f32[] {
  %custom-call.12 = (bf16[8,112,112,64]{3,2,1,0}, u8[0]{0}) custom-call(%p0, %p1), custom_call_target="__cudnn$convForward", metadata={op_name="jit(replica_step)/shard_map/jvp(ResNet)/stem_conv/conv_general_dilated"}
  %loop_reduce_fusion = f32[64]{0} fusion(%p2), kind=kInput, calls=%fused_computation.8, metadata={op_name="jit(replica_step)/shard_map/jvp(ResNet)/stem_bn/reduce_sum"}
  %loop_add_fusion.3 = f32[64]{0} fusion(%p3), kind=kLoop, calls=%fused_computation.7, metadata={op_name="jit(replica_step)/shard_map/optimizer_update/add"}
  %cublas-gemm.1 = (f32[8,1000]{1,0}, s8[0]{0}) custom-call(%p4, %p5), custom_call_target="__cublas$gemm"
  %all-reduce-start.2 = f32[64]{0} all-reduce-start(%p6), replica_groups={}, to_apply=%region_1.2
  %conv_fusion = bf16[8,56,56,64]{3,2,1,0} fusion(%p7, %p8), kind=kCustom, calls=%fused_computation.9
  ROOT %copy.5 = f32[] copy(%p9)
}
"""


def test_each_instruction_is_named_by_what_it_computes():
    categories = sp.instruction_categories(HLO, SCOPE)
    assert categories["custom-call.12"] == sp.CONVOLUTION
    assert categories["cublas-gemm.1"] == sp.CONVOLUTION
    assert categories["conv_fusion"] == sp.CONVOLUTION  # a fusion around a convolution
    assert categories["loop_reduce_fusion"] == sp.ELEMENTWISE  # batch norm's statistics
    assert categories["loop_add_fusion.3"] == sp.UPDATE  # its operations are the update's
    assert categories["all-reduce-start.2"] == sp.COLLECTIVE
    assert categories["copy.5"] == sp.ELEMENTWISE


def event(name, start_us, duration_us, hlo_op=None):
    return {"ph": "X", "name": name, "ts": start_us, "dur": duration_us, "args": {"hlo_op": hlo_op} if hlo_op else {}}


def test_the_breakdown_shares_a_steps_wall_time_and_the_host_gets_what_no_device_covered():
    categories = {"conv": sp.CONVOLUTION, "bn": sp.ELEMENTWISE, "upd": sp.UPDATE}
    # Two steps in 0.01 s of wall time; the device busy 6 ms of it: conv 4 ms, bn 1.5 ms, update 0.5 ms.
    events = [event("sm90_xmma_fprop", 0, 2000, "conv"), event("loop_fusion", 2000, 750, "bn"),
              event("sm90_xmma_fprop", 5000, 2000, "conv"), event("loop_fusion", 7000, 750, "bn"),
              event("loop_add_fusion", 7750, 500, "upd"), event("PjitFunction(step)", 0, 9000),  # a host event
              {"ph": "M", "name": "process_name"}]
    found = sp.breakdown(events, categories, wall_s=0.01, steps=2)
    assert found["events"] == 5 and found["step_s"] == pytest.approx(0.005)
    per = found["per_step_s"]
    assert per[sp.CONVOLUTION] == pytest.approx(0.002) and per[sp.ELEMENTWISE] == pytest.approx(0.00075)
    assert per[sp.UPDATE] == pytest.approx(0.00025) and per[sp.HOST] == pytest.approx(0.002)
    assert sum(found["share"].values()) == pytest.approx(1.0)
    # Kernels a step: one update kernel in two steps; the host event is not a kernel.
    assert found["kernels_per_step"] == {sp.CONVOLUTION: 1.0, sp.ELEMENTWISE: 1.0, sp.UPDATE: 0.5,
                                         sp.COLLECTIVE: 0.0, sp.OTHER: 0.0}


def test_overlapping_devices_share_their_busy_time_not_add_it():
    """Two devices busy at once (a CPU's devices are threads): 4 ms of events in 2 ms of busy time."""
    events = [event("conv.1", 0, 2000), event("conv.1", 0, 1000), event("fusion.2", 1000, 1000)]
    found = sp.breakdown(events, {"conv.1": sp.CONVOLUTION, "fusion.2": sp.ELEMENTWISE}, wall_s=0.004, steps=1)
    assert found["per_step_s"][sp.CONVOLUTION] == pytest.approx(0.0015)
    assert found["per_step_s"][sp.ELEMENTWISE] == pytest.approx(0.0005)
    assert found["per_step_s"][sp.HOST] == pytest.approx(0.002)


def test_no_device_events_is_all_host():
    found = sp.breakdown([], {}, wall_s=0.3, steps=3)
    assert found["share"][sp.HOST] == pytest.approx(1.0) and found["events"] == 0
