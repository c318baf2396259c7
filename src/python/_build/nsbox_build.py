"""The package's build backend: setuptools' own (setuptools.build_meta),
taken from the system's Python when pip's isolated build environment has
none, so that `pip install src/python` works offline with Debian's
python3-setuptools and python3-wheel, and nothing is downloaded."""

import sys
from typing import Any, Dict, List, Optional

_SYSTEM = "/usr/lib/python3/dist-packages"

try:
    import setuptools.build_meta as _backend
except ImportError:  # pip's isolated build environment
    if _SYSTEM not in sys.path:
        sys.path.append(_SYSTEM)
    import setuptools.build_meta as _backend  # type: ignore[import]


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


build_wheel = _backend.build_wheel
build_sdist = _backend.build_sdist
prepare_metadata_for_build_wheel = _backend.prepare_metadata_for_build_wheel
