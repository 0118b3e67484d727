"""The targeted schedules, one module per family (the plan that orders
them: ``harness.scenarios._targeted``)."""
