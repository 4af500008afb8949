"""processors"""
