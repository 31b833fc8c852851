"""Google's `import tokenization`: bert_toolkit/text/tokenization.py under its original name.

The same module object as `bert_toolkit.text.tokenization`, not a copy, so code
written against google-research/bert's tokenization.py runs unchanged from the
repository root.
"""

import sys

from bert_toolkit.text import tokenization

sys.modules[__name__] = tokenization
