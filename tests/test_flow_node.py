"""A workflow graph's Node is copied field by field as it joins a bigger workflow (Node.moved, which
costs a quarter of dataclasses.replace; a 10,000-member group copies each member twice): the copy
must keep every field, so a field added to Node and forgotten there fails here."""
import dataclasses

from delayed import PyTask
from delayed.wire.flow import Node, When


def test_a_moved_node_keeps_every_field_and_shifts_its_predecessors():
    node = Node(PyTask("tasks:add", [1]), "other", True, True, [(0, When.SUCCESS), (3, When.ALWAYS)], 2, True)
    fields = [field.name for field in dataclasses.fields(Node)]
    defaults = {field.name: field.default_factory() if field.default_factory is not dataclasses.MISSING
                else field.default for field in dataclasses.fields(Node)}
    unset = [name for name in fields if getattr(node, name) == defaults[name]]
    assert unset == [], f"set these fields off their defaults in the sample node above: {unset}"

    moved = node.moved(5)

    assert moved.inputs_from == [(5, When.SUCCESS), (8, When.ALWAYS)]
    assert moved.inputs_from is not node.inputs_from
    assert node.inputs_from == [(0, When.SUCCESS), (3, When.ALWAYS)]
    assert {name: getattr(moved, name) for name in fields if name != "inputs_from"} == \
        {name: getattr(node, name) for name in fields if name != "inputs_from"}
