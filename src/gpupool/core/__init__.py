"""The vocabulary every layer shares: jobs, resources, hardware, states, units, clocks.

Standard library only, frozen dataclasses, no I/O. Everything else imports from here.
"""
