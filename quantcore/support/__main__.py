"""`python -m quantcore.support` prints SUPPORTED_OPS.md."""

from quantcore.support.markdown import supported_ops_markdown

print(supported_ops_markdown(), end="")
