"""otlp"""
