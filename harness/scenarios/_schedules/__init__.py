"""Each fault family's scenarios: one module per family (or per few
related families), holding its targeted schedules and its sampled-search
episode, and registering both (``_registry``: ``@category``, ``@sweep``,
``@episode_of``). A family's record names its module
(``FaultFamily.schedules``); :func:`._registry.load` imports them all, in
the records' order. Beside them: what the schedules are made of
(``_common``), what the episodes draw with (``_draws``, ``_swarm``), and
the commit-fault pairs every family's commit faults share (``pairs``).
The plan that interleaves the categories is ``harness.scenarios._targeted``."""
