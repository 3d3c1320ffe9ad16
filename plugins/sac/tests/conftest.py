from rlf.nn import set_threads

# Several test runs share a small machine; one thread each avoids oversubscription, which made
# these small networks tens of times slower.
set_threads(1)
