"""The torch.export frontend: a model exported by ``torch.export`` (or an
``ExportedProgram`` given by the user), decomposed to core ATen and lowered into the
same IR as the jit frontend, with the same lowering rules where the aten names agree.

``compile(..., frontend="export")`` uses it (:class:`.frontend.ExportFrontend`); see
:mod:`.program` (obtaining the program), :mod:`.kept_ops` (ops not decomposed),
:mod:`.lower` (the driver) and :mod:`.context` (what a rule sees of an FX node).
"""
