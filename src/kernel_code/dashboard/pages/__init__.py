"""The dashboard's pages: ``sessions`` (the list at ``/``) and ``session`` (one session's panels)."""
