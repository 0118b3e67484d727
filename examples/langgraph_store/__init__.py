"""A subscription workflow that keeps long-term memory in LangGraph's ``Store``, in two versions.

A node writes what it learned about the customer to the store and then
charges the first month; the next node sends a welcome mail. ``naive.py``
keys the memory item by a fresh ``uuid4`` (as LangGraph's memory examples
do); ``correct.py`` keys it by thread id and step, so the node that a resume
repeats writes the same item again instead of a second one. Both charge with
a key from the thread id: the memory is the difference. ``measure_kill.py``
counts the memory items a kill leaves.
"""
