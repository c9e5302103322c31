"""The decode CUDA-graph bucket planner (`dsv4ops buckets plan`)."""
