// Anchors the precompiled header that the in-tree targets share.
