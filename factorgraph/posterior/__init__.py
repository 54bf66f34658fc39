"""What a fit returns and what reads it: ``Result`` and ``fg.compare``, draws from q and from the prior,
``fg.predict``, the pointwise log-likelihood, ``to_arviz`` and ``summary()``.

These tools read a fitted q and the model graph; they never run the engine, which sits above them and
returns a ``Result``.
"""
