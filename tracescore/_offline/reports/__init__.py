"""Self-contained HTML reports (Jinja2 templates) for eval, calibrate, rescore and view."""
