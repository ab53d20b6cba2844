"""What crosses a process boundary: results, the judge's events and requests, options, source and problem digests,
plain-text reports. Stdlib only: kerneltui and the agents import it without the GPU stack.
"""
