"""Schema evolution of a typed column, as Delta's schema merge does it: a struct gains the
fields it lacks (nullable, appended in order), nested structs, lists and maps merge inside;
anything else must be the same type, or the change is one the table cannot express.

Types read back from a Delta table's schema come as Arrow's large/view variants at times;
`normalize` maps them to the types tiering writes, so they compare equal.
"""

from __future__ import annotations

import pyarrow as pa


class TypeConflict(ValueError):
    """The new type cannot be merged into the table's (the message names the field)."""


def normalize(t: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz=t.tz)
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(normalize(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(normalize(t.key_type), t.item_field.with_type(normalize(t.item_type)))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return pa.list_(t.value_field.with_type(normalize(t.value_type)))
    return t


def merge(table: pa.DataType, new: pa.DataType, path: str = "") -> pa.DataType:
    """The table's type after data of type `new` is added; TypeConflict if it cannot be."""
    table, new = normalize(table), normalize(new)
    if pa.types.is_struct(table) and pa.types.is_struct(new):
        fields = {f.name: f for f in table}
        for f in new:
            here = f"{path}.{f.name}" if path else f.name
            old = fields.get(f.name)
            fields[f.name] = f if old is None else old.with_type(merge(old.type, f.type, here))
        return pa.struct(list(fields.values()))
    if pa.types.is_list(table) and pa.types.is_list(new):
        element = merge(table.value_type, new.value_type, f"{path}[]")
        return pa.list_(table.value_field.with_type(element))
    if pa.types.is_map(table) and pa.types.is_map(new):
        if table.key_type != new.key_type:
            raise TypeConflict(f"{path}: map keys are {new.key_type}, the table's {table.key_type}")
        item = merge(table.item_type, new.item_type, f"{path}{{}}")
        return pa.map_(table.key_type, table.item_field.with_type(item))
    if table != new:
        where = path or "the value"
        raise TypeConflict(
            f"{where} is {new} in this schema but {table} in the table: "
            "a change the table cannot express"
        )
    return table
