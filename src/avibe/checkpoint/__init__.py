"""The checkpoint core: pure logic for mind, memo, scene, validation, budgets and plans (SPEC C, M, N, S, V).

No IO, no clock; token counts come through the `avibe.ports.TokenCounter` port. Import from the
submodules (`avibe.checkpoint.budgets`, `.trigger`, `.mind`, `.memo`, `.scene`, `.validate`, `.model`).
"""
