"""dsv4ops: operations toolkit for a DeepSeek-V4-Flash PD deployment on SGLang."""

__version__ = "0.6.0"
