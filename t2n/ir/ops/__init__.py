"""Built-in IR op families. Each module defines a ``TABLE`` (an :class:`~t2n.ir.schema.OpTable`);
:meth:`t2n.ir.schema.OpSet.default` collects them all."""
