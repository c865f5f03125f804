"""The Keras target: a plan as `keras.distribution` objects (`distribution`), built from
planc's subclasses of Keras's classes (`classes`) and Keras as planc finds it (`env`).

Nothing is imported here: Keras is optional, and is imported only when a Keras call is
made.
"""
