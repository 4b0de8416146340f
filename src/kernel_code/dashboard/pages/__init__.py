"""The dashboard's pages: ``sessions`` (the list at ``/``), ``session`` (one session's panels) and ``sweep``
(the sweeps at ``/sweeps``, one sweep's results at ``/sweep/<id>``)."""
