"""Plans of the two-layer MLP (`dense_0`, `dense_1`) more than one wing's tests compile."""

# FSDP over 4 devices by tensor parallelism over 2, the kernels split on both axes.
FSDP_TP = '''
mesh(fsdp = 4, model = 2)
model_parallel(batch = fsdp)
layout {
    "dense_0/kernel" -> (fsdp, model)
    "dense_1/kernel" -> (model, fsdp)
    "dense_.*/bias"  -> replicated
}
'''
