"""Google's `import optimization`: bert_toolkit/model/optimization.py under its original name.

The same module object as `bert_toolkit.model.optimization`, not a copy, so code
written against google-research/bert's optimization.py runs unchanged from the
repository root.
"""

import sys

from bert_toolkit.model import optimization

sys.modules[__name__] = optimization
