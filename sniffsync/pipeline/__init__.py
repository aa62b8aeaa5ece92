"""One run's analysis (:mod:`.run`: read, merge, PPDUs, detection, fairness) and its cache (:mod:`.cache`)."""
