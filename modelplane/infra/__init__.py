"""The Pulumi layer: the only code that imports pulumi. It turns decided data into resources."""
