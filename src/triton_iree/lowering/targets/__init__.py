"""Per-target lowering choices, one module a target family."""
