// placeholder: implemented by the wire format work
