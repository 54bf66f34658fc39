"""The model language: variables, factors, plates, expressions, gates and data nodes, and the builders that
make them (``fg.gaussian``, ``fg.inner``, ``fg.select``, ...).

A model built here is a plain graph; the engine (``schedules``) compiles and runs it.  Nothing in this
package imports the engine, the posterior tools or the canned models.
"""
