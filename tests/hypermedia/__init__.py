"""The hypermedia node's formats, checked against the JS reference clients in tests/js: DAG-CBOR, ids, blobs and
markdown."""
