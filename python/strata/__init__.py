"""strata: hierarchical, compressed collectives for training across datacenters.

``import strata.torch`` registers the torch.distributed backend ``"strata"``.
"""
