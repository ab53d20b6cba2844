"""What crosses a process boundary: results, the judge's events and requests, the judge <-> worker messages (each
reply checked once as it is read), options, source and problem digests, plain-text reports. Stdlib only: kerneltui
and the agents import it without the GPU stack.
"""
