"""The element library, one module per family (DESIGN §1). A family's module is imported, and
registers its classes, when a graph first names one of its elements (runtime/registry.py)."""
