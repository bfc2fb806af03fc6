"""The processor runtime (consume -> process -> produce, exactly-once) and the processors.

Built in the scheduler issue; nothing here yet.
"""
