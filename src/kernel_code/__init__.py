"""kernel_code"""
