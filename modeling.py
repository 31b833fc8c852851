"""Google's `import modeling`: bert_toolkit/model/modeling.py under its original name.

The same module object as `bert_toolkit.model.modeling`, not a copy, so code
written against google-research/bert's modeling.py runs unchanged from the
repository root.
"""

import sys

from bert_toolkit.model import modeling

sys.modules[__name__] = modeling
